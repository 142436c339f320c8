//! The two `wasm-ccm run` processes under test: the product binary, started with leader
//! election on a short lease, each with its own log file; killed with SIGKILL (never a graceful
//! stop: the point is a crash at an arbitrary moment) and started again.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::Context as _;

use super::rss;

/// The product binary the soak runs: `explicit`, else `wasm-ccm` beside this executable (how
/// cargo and an install lay them out), else the first on PATH.
pub(crate) fn product_binary(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(path) = explicit {
        anyhow::ensure!(
            path.is_file(),
            "--ccm-binary {}: no such file; build the product binary (cargo build -p wasm-ccm)",
            path.display()
        );
        return Ok(path.to_path_buf());
    }
    let name = format!("wasm-ccm{}", std::env::consts::EXE_SUFFIX);
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(&name)));
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(&name));
    beside
        .into_iter()
        .chain(on_path)
        .find(|candidate| candidate.is_file())
        .with_context(|| {
            format!(
                "cannot find the product binary `{name}` beside this executable or on PATH: build it (cargo build -p wasm-ccm) or pass --ccm-binary"
            )
        })
}

/// One of the processes, across its incarnations.
struct Slot {
    label: char,
    child: Option<Child>,
    incarnation: u32,
    log: PathBuf,
    identity: Option<String>,
}

/// The processes of a soak; every child is killed on drop.
pub(super) struct Processes {
    exe: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    /// More environment for process `i` (its wall clock skewed, for one).
    slot_env: Vec<Vec<(String, String)>>,
    dir: PathBuf,
    /// A kubeconfig (YAML) for a bearer token: each incarnation gets its own token
    /// ([`super::invariants::TOKEN_PREFIX`]`<slot>-<incarnation>`), so the apiserver's request
    /// log shows which process wrote.
    kubeconfig: Box<dyn Fn(&str) -> String>,
    slots: Vec<Slot>,
    /// Restarts after a process exited on its own (e.g. on losing the lease).
    pub exits: u64,
    /// Restarts of processes stuck without a cluster ID ([`Processes::restart_without_cluster_id`]).
    pub no_cluster_id: u64,
    /// The memory of every incarnation.
    rss: rss::Recorder,
}

impl Processes {
    /// Starts `count` processes of `exe` with `args` and `env` (and `slot_env[i]` for process
    /// `i`, where given); logs go to `dir`, and their memory samples to `dir/rss.log`.
    pub(super) fn start(
        exe: PathBuf,
        args: Vec<String>,
        env: Vec<(String, String)>,
        slot_env: Vec<Vec<(String, String)>>,
        dir: &Path,
        count: usize,
        kubeconfig: Box<dyn Fn(&str) -> String>,
    ) -> anyhow::Result<Self> {
        let mut procs = Processes {
            exe,
            args,
            env,
            slot_env,
            dir: dir.to_path_buf(),
            kubeconfig,
            slots: Vec::new(),
            exits: 0,
            no_cluster_id: 0,
            rss: rss::Recorder::new(&dir.join("rss.log")),
        };
        for i in 0..count {
            let label = char::from(b'a' + (i % 26) as u8);
            procs.slots.push(Slot {
                label,
                child: None,
                incarnation: 0,
                log: PathBuf::new(),
                identity: None,
            });
            procs.spawn(i)?;
        }
        Ok(procs)
    }

    fn spawn(&mut self, i: usize) -> anyhow::Result<()> {
        let slot = &mut self.slots[i];
        slot.incarnation += 1;
        slot.identity = None;
        slot.log = self
            .dir
            .join(format!("ccm-{}-{}.log", slot.label, slot.incarnation));
        let stderr = std::fs::File::create(&slot.log)
            .with_context(|| format!("creating {}", slot.log.display()))?;
        let token = format!(
            "{}{}-{}",
            super::invariants::TOKEN_PREFIX,
            slot.label,
            slot.incarnation
        );
        let kubeconfig = self
            .dir
            .join(format!("kubeconfig-{}-{}", slot.label, slot.incarnation));
        std::fs::write(&kubeconfig, (self.kubeconfig)(&token))
            .with_context(|| format!("writing {}", kubeconfig.display()))?;
        let child = Command::new(&self.exe)
            .args(&self.args)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .envs(
                self.slot_env
                    .get(i)
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k, v)),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("starting {} run", self.exe.display()))?;
        self.rss.born(slot.label, slot.incarnation, child.id());
        slot.child = Some(child);
        Ok(())
    }

    /// `a#2 (pid 1234)`.
    fn name(&self, i: usize) -> String {
        let slot = &self.slots[i];
        let pid = slot.child.as_ref().map_or(0, Child::id);
        format!("{}#{} (pid {pid})", slot.label, slot.incarnation)
    }

    /// The leader-election identity of process `i`, from the line it logs while waiting for
    /// the lease (`identity=host_uuid`), once it has logged it.
    fn identity(&mut self, i: usize) -> Option<String> {
        let slot = &mut self.slots[i];
        if slot.identity.is_none() {
            let text = std::fs::read_to_string(&slot.log).ok()?;
            let at = text.find("identity=")? + "identity=".len();
            let id: String = text[at..]
                .chars()
                .take_while(|c| !c.is_whitespace())
                .collect();
            slot.identity = Some(id.trim_matches('"').to_string()).filter(|s| !s.is_empty());
        }
        slot.identity.clone()
    }

    /// Starts again every process that exited on its own; one history line per restart.
    pub(super) fn reap(&mut self) -> anyhow::Result<Vec<String>> {
        let mut lines = Vec::new();
        for i in 0..self.slots.len() {
            let exited = match self.slots[i].child.as_mut().map(Child::try_wait) {
                Some(Ok(Some(status))) => Some(status.to_string()),
                Some(Ok(None)) => None,
                Some(Err(e)) => Some(format!("unknown status ({e})")),
                None => Some("not running".into()),
            };
            if let Some(status) = exited {
                let before = self.name(i);
                self.rss
                    .died(self.slots[i].label, self.slots[i].incarnation);
                // Its last words: why it exited, for the history.
                let text = std::fs::read_to_string(&self.slots[i].log).unwrap_or_default();
                let last = text
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("")
                    .chars()
                    .take(300)
                    .collect::<String>();
                self.exits += 1;
                self.spawn(i)?;
                lines.push(format!(
                    "process {before} exited ({status}; last log line: {last}); started {}",
                    self.name(i)
                ));
            }
        }
        Ok(lines)
    }

    /// Kills and starts again every process that started without a cluster ID (it could not
    /// read the kube-system namespace at start, e.g. during an apiserver restart) and whose
    /// driver then failed for the lack of it: the product reads the namespace once and runs on
    /// without it (BENCHMARKS.md, RELIABILITY, finding 8), so such a process never converges.
    /// What an operator (or a liveness probe) would do; one history line per restart.
    pub(super) fn restart_without_cluster_id(&mut self) -> anyhow::Result<Vec<String>> {
        let mut lines = Vec::new();
        for i in 0..self.slots.len() {
            if self.slots[i].child.is_none() {
                continue;
            }
            let text = std::fs::read_to_string(&self.slots[i].log).unwrap_or_default();
            if !(text.contains("the driver gets no cluster ID")
                && text.contains("permanent: no cluster ID"))
            {
                continue;
            }
            let before = self.name(i);
            self.kill(i);
            self.spawn(i)?;
            self.no_cluster_id += 1;
            lines.push(format!(
                "operator restarted {before}: it started without a cluster ID (the kube-system namespace was unreadable at start) and its driver fails without one (known issue, finding 8); started {}",
                self.name(i)
            ));
        }
        Ok(lines)
    }

    /// Whether a live process has the leader-election identity `holder`.
    pub(super) fn is_live(&mut self, holder: &str) -> bool {
        (0..self.slots.len()).any(|i| self.identity(i).as_deref() == Some(holder))
    }

    /// SIGKILLs the process holding the lease as `holder` and starts it again. None when no
    /// live process has that identity (the holder was killed before and its lease has not
    /// expired yet, or it has not logged its identity).
    pub(super) fn kill_holder(&mut self, holder: &str) -> anyhow::Result<Option<String>> {
        let Some(i) = (0..self.slots.len()).find(|&i| self.identity(i).as_deref() == Some(holder))
        else {
            return Ok(None);
        };
        let before = self.name(i);
        self.kill(i);
        self.spawn(i)?;
        Ok(Some(format!(
            "SIGKILLed leader {before}; started {}",
            self.name(i)
        )))
    }

    /// SIGKILLs process `i` (no lease release, no graceful drain), its memory read just
    /// before: afterwards there is no `/proc` entry to read, and a process killed between two
    /// periodic samples would otherwise lose its last (often largest) reading.
    fn kill(&mut self, i: usize) {
        let (label, incarnation) = (self.slots[i].label, self.slots[i].incarnation);
        if let Some(mut child) = self.slots[i].child.take() {
            self.rss.sample(label, incarnation);
            let _ = child.kill();
            let _ = child.wait();
            self.rss.died(label, incarnation);
        }
    }

    /// Reads the memory of every live process.
    fn sample_all(&mut self) {
        for slot in &self.slots {
            if slot.child.is_some() {
                self.rss.sample(slot.label, slot.incarnation);
            }
        }
        self.rss.flush();
    }

    /// Reads the memory of every live process when `interval` has passed since the last
    /// periodic sample.
    pub(super) fn sample_rss(&mut self, interval: std::time::Duration) {
        if self.rss.due(interval) {
            self.sample_all();
        }
    }

    /// The memory summary ([`rss::Recorder::summary`]; `interval`: the periodic sampling's,
    /// as reported), after a last sample of every live process (they count as ending now).
    pub(super) fn rss_summary(&mut self, interval: std::time::Duration) -> serde_json::Value {
        self.sample_all();
        self.rss.summary(interval)
    }

    /// The log files of the current incarnations.
    pub(super) fn logs(&self) -> Vec<PathBuf> {
        self.slots.iter().map(|s| s.log.clone()).collect()
    }

    /// Kills every process.
    pub(super) fn stop(&mut self) {
        for i in 0..self.slots.len() {
            self.kill(i);
        }
        self.rss.flush();
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        self.stop();
    }
}
