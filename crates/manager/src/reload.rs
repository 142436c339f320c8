//! Hot reload of a file-mounted driver.
//!
//! A ConfigMap volume updates by swapping a symlink (`..data`) to a new directory, so the file
//! the host watches is never written in place: inotify on the path sees nothing. The watcher
//! therefore polls the path's metadata through the symlinks (device, inode, size, mtime) at a
//! short interval, which sees every swap, costs one `stat` per tick, and works the same on any
//! volume type. A changed file is read and hashed; new content is compiled and initialised off
//! the reconcile path (controllers keep calling the old driver meanwhile), checked, and swapped
//! in atomically. Calls in flight finish on the version they started on. A bad version is
//! refused with a Warning event and a metric, and the old one keeps serving. The same bad
//! content is not tried again until the file changes, except after a refusal a passing outage
//! may have caused (`init` failed, the load was cut short) or a signature that did not match (its
//! file may arrive after the driver's), which is retried every minute.

use std::future::Future;
use std::os::unix::fs::MetadataExt as _;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;
use wasm_ccm_runtime::Driver;

use wasm_ccm_controllers::DriverSlot;
use wasm_ccm_controllers::Events;
use wasm_ccm_controllers::Metrics;

/// Why a new version was refused.
#[derive(Debug, Clone)]
pub struct Refusal {
    /// A metric label: `not-a-component`, `wit-version`, `init-failed`, `digest-mismatch`,
    /// `signature`, `incompatible`, `unreadable`, `load-failed`.
    pub reason: &'static str,
    /// What went wrong and what to do.
    pub message: String,
}

/// Compiles and initialises new driver bytes (`origin` names them in messages).
pub type Loader = Arc<
    dyn Fn(String, Vec<u8>) -> Pin<Box<dyn Future<Output = Result<Arc<Driver>, Refusal>> + Send>>
        + Send
        + Sync,
>;

/// What the watcher needs.
pub struct ReloadOptions {
    /// The mounted driver (through its symlinks).
    pub path: PathBuf,
    /// How often the path's metadata is checked.
    pub interval: Duration,
    /// `--driver-sha256`: only this content may run.
    pub pinned_sha256: Option<String>,
    /// Compiles and initialises a new version.
    pub load: Loader,
    /// The object reload events are about (this pod); `None` records none.
    pub regarding: Option<ObjectReference>,
}

/// Sets the driver-info gauge for the driver now in service under `label` (its configured
/// name with several drivers, else its own name).
pub(crate) fn record_in_service(
    metrics: &Metrics,
    label: &str,
    driver: &Driver,
    trigger: &str,
    took: Duration,
) {
    metrics.clear_where("wasm_ccm_driver_info", ("driver", label));
    metrics.set(
        "wasm_ccm_driver_info",
        &[
            ("driver", label),
            ("version", &driver.info().version),
            ("sha256", &driver.compiled().sha256),
        ],
        1.0,
    );
    metrics.inc(
        "wasm_ccm_driver_loads_total",
        &[("driver", label), ("trigger", trigger)],
    );
    metrics.set(
        "wasm_ccm_driver_load_duration_seconds",
        &[("driver", label)],
        took.as_secs_f64(),
    );
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
}

fn fingerprint(path: &std::path::Path) -> Option<Fingerprint> {
    // `metadata` follows symlinks: a ConfigMap swap changes the inode it reaches.
    let m = std::fs::metadata(path).ok()?;
    Some(Fingerprint {
        dev: m.dev(),
        ino: m.ino(),
        len: m.len(),
        mtime: (m.mtime(), m.mtime_nsec()),
    })
}

/// Watches `opts.path` until `cancel`, swapping new versions into `slot`.
pub(crate) async fn watch(
    label: String,
    slot: Arc<DriverSlot>,
    opts: ReloadOptions,
    metrics: Arc<Metrics>,
    events: Arc<Events>,
    cancel: CancellationToken,
) {
    // Nothing seen yet: the first tick reads the file once, so a version written between the
    // startup load and this task is not missed.
    let mut seen: Option<Fingerprint> = None;
    // The last refused content, and when it may be tried again (never, for a refusal the same
    // bytes will always earn; after a pause, for one a passing cloud outage may have caused).
    let mut refused: Option<(String, Option<Instant>)> = None;
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(opts.interval) => {}
        }
        let now = fingerprint(&opts.path);
        let retry_due = matches!(&refused, Some((_, Some(at))) if Instant::now() >= *at);
        if now.is_none() || (now == seen && !retry_due) {
            // Missing for a moment (mid-swap on some volume types): look again next tick.
            continue;
        }
        let bytes = match tokio::fs::read(&opts.path).await {
            Ok(b) => b,
            Err(e) => {
                tracing::debug!(path = %opts.path.display(), error = %e, "driver file not readable yet");
                continue;
            }
        };
        seen = now;
        let sha256 = hex::encode(Sha256::digest(&bytes));
        let running = slot.get();
        if sha256 == running.compiled().sha256 {
            // Back to the version in service: a later return of refused bytes is news again.
            refused = None;
            continue;
        }
        if let Some((sha, retry_at)) = &refused
            && *sha == sha256
            && !retry_at.is_some_and(|at| Instant::now() >= at)
        {
            continue;
        }
        let started = Instant::now();
        match reload(&running, &opts, sha256.clone(), bytes).await {
            Ok(new) => {
                refused = None;
                tracing::info!(
                    driver = %label,
                    version = %new.info().version,
                    sha256 = %new.compiled().sha256,
                    replaced = %running.compiled().sha256,
                    "driver reloaded from {}", opts.path.display()
                );
                record_in_service(&metrics, &label, &new, "reload", started.elapsed());
                let note = format!(
                    "driver {label}: {} {} (sha256 {}) replaced {} (sha256 {}) from {}",
                    new.name(),
                    new.info().version,
                    short(&new.compiled().sha256),
                    running.info().version,
                    short(&running.compiled().sha256),
                    opts.path.display()
                );
                slot.swap(new);
                publish(&events, &opts, false, "DriverReloaded", &note).await;
            }
            Err(refusal) => {
                tracing::error!(
                    driver = %label,
                    reason = refusal.reason,
                    sha256 = %sha256,
                    "new driver version refused; the running one keeps serving: {}",
                    refusal.message
                );
                metrics.inc(
                    "wasm_ccm_driver_reload_refusals_total",
                    &[("driver", &label), ("reason", refusal.reason)],
                );
                let retry_at = transient(refusal.reason).then(|| Instant::now() + RETRY_TRANSIENT);
                refused = Some((sha256.clone(), retry_at));
                let note = format!(
                    "driver {label}: the new version at {} (sha256 {}) was refused and {} {} keeps running: {}",
                    opts.path.display(),
                    short(&sha256),
                    running.name(),
                    running.info().version,
                    refusal.message
                );
                publish(&events, &opts, true, "DriverReloadRefused", &note).await;
            }
        }
    }
}

/// Loads the new bytes and checks they can replace `running`.
async fn reload(
    running: &Driver,
    opts: &ReloadOptions,
    sha256: String,
    bytes: Vec<u8>,
) -> Result<Arc<Driver>, Refusal> {
    if let Some(pinned) = &opts.pinned_sha256
        && *pinned != sha256
    {
        return Err(Refusal {
            reason: "digest-mismatch",
            message: format!(
                "its sha256 is {sha256} but --driver-sha256 pins {pinned}; to roll out this version, change --driver-sha256 with it"
            ),
        });
    }
    let new = (opts.load)(opts.path.display().to_string(), bytes).await?;
    if new.name() != running.name() {
        return Err(Refusal {
            reason: "incompatible",
            message: format!(
                "it is the driver {:?}, not {:?}; a different cloud provider needs a new deployment",
                new.name(),
                running.name()
            ),
        });
    }
    // Every Node's provider ID carries the scheme: a new one would make the driver disown all
    // of them (and, were it trusted, claim another provider's).
    if new.info().provider_id_scheme != running.info().provider_id_scheme {
        return Err(Refusal {
            reason: "incompatible",
            message: format!(
                "its provider IDs use the scheme {:?} where the running version's use {:?}; the Nodes' provider IDs cannot change, so this needs a migration, not a reload",
                new.info().provider_id_scheme,
                running.info().provider_id_scheme
            ),
        });
    }
    // What the new version may reach or write, said where an operator reads it.
    tracing::info!(
        driver = %new.name(),
        version = %new.info().version,
        egress = %new.egress().join(", "),
        env_prefixes = %new.info().env_prefixes.join(", "),
        annotation_prefixes = %new.info().annotation_prefixes.join(", "),
        "reloaded driver's grants"
    );
    for warning in new.egress_warnings() {
        tracing::warn!(driver = %new.name(), "egress grant: {warning}");
    }
    let (was, is) = (
        running.compiled().surface.exports,
        new.compiled().surface.exports,
    );
    if was != is {
        return Err(Refusal {
            reason: "incompatible",
            message: format!(
                "it exports {:?} where the running version exports {:?}; the controllers started for those interfaces, so restart the pod to change them",
                is.names(),
                was.names()
            ),
        });
    }
    Ok(new)
}

async fn publish(events: &Events, opts: &ReloadOptions, warning: bool, reason: &str, note: &str) {
    if let Some(regarding) = &opts.regarding {
        events
            .publish(
                "cloud-controller-manager",
                regarding,
                warning,
                reason,
                note,
                "Reload",
            )
            .await;
    }
}

/// How long before content refused for a possibly passing reason is tried again.
const RETRY_TRANSIENT: Duration = Duration::from_secs(60);

/// Refusals the same bytes may not earn next time: `init` failing on an unreachable cloud, a
/// load cut short, a signature that did not match (its file may be mounted apart from the
/// driver's and arrive later: the same bytes with a new signature must be tried again).
fn transient(reason: &str) -> bool {
    matches!(reason, "init-failed" | "load-failed" | "signature")
}

fn short(sha256: &str) -> &str {
    &sha256[..sha256.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_ccm_drivers::hostile_with_info;
    use wasm_ccm_runtime::{DriverOptions, Runtime};

    #[test]
    fn refusals_a_later_mount_may_cure_are_retried() {
        for reason in ["init-failed", "load-failed", "signature"] {
            assert!(transient(reason), "{reason}");
        }
        for reason in [
            "not-a-component",
            "wit-version",
            "incompatible",
            "digest-mismatch",
        ] {
            assert!(!transient(reason), "{reason}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_version_with_another_provider_id_scheme_is_refused() {
        let runtime = Runtime::new(Default::default()).expect("runtime");
        let load = |runtime: Runtime, bytes: Vec<u8>| async move {
            let compiled = runtime
                .compile("hostile.wasm", bytes)
                .await
                .expect("compiles");
            Arc::new(
                runtime
                    .load(&compiled, DriverOptions::default())
                    .await
                    .expect("loads"),
            )
        };
        let running = load(runtime.clone(), hostile_with_info("normal")).await;
        let loader_runtime = runtime.clone();
        let opts = ReloadOptions {
            path: PathBuf::from("hostile.wasm"),
            interval: Duration::from_secs(1),
            pinned_sha256: None,
            load: Arc::new(move |_origin, bytes| {
                let runtime = loader_runtime.clone();
                Box::pin(async move { Ok(load(runtime, bytes).await) })
            }),
            regarding: None,
        };
        let refusal = match reload(
            &running,
            &opts,
            "x".into(),
            hostile_with_info("other-scheme"),
        )
        .await
        {
            Ok(_) => panic!("a new provider-ID scheme was swapped in"),
            Err(r) => r,
        };
        assert_eq!(refusal.reason, "incompatible");
        assert!(
            refusal.message.contains("\"hostile2\""),
            "{}",
            refusal.message
        );
        // The same scheme is accepted.
        assert!(
            reload(&running, &opts, "y".into(), hostile_with_info("normal"))
                .await
                .is_ok()
        );
    }
}
