//! The `log` capability: driver log lines into the host's log, tagged with the driver, function
//! and object, bounded, rate-limited and redacted (`DriverLogger`). The driver's stdout and
//! stderr become log lines too.
//!
//! As a capability unit (see `crate::capability`):
//! - config: [`Config`] (its [`LogLimits`] and [`LogSink`]), and the secrets the host finds in
//!   the driver's environment and cloud config (`logger`);
//! - per-driver state: one `DriverLogger` in the driver's `DriverHost`, which every other part
//!   of the host also redacts driver text with;
//! - per-instance state: the call's tags (shared with stdout and stderr); no per-call state;
//! - host view: `LogHost`, which implements `log::Host`; a store's data gives it through
//!   `LogView` (as wasmtime's WASI asks for `WasiView`), so this unit knows nothing of the
//!   store or of the driver's options.

mod logger;
pub(crate) mod stdio;

// The public `wasm_ccm_runtime::log` API is the logger's, unchanged by the move into the
// capability unit.
pub use self::logger::*;

use std::sync::{Arc, Mutex};

use wasmtime::component::{HasData, Linker};

use crate::bindings::log as wit;

/// What the `log` capability is configured with, per driver (`DriverOptions::log`).
#[derive(Clone)]
pub struct Config {
    /// Rate and size limits of the driver's lines.
    pub limits: LogLimits,
    /// Where the lines go.
    pub sink: Arc<dyn LogSink>,
}

impl Default for Config {
    /// The default limits, into the host's `tracing` log.
    fn default() -> Self {
        Config {
            limits: LogLimits::default(),
            sink: Arc::new(TracingSink),
        }
    }
}

/// Function and object of the call in progress, shared by an instance's `log` host view and
/// its stdout/stderr writers.
#[derive(Default, Clone)]
pub(crate) struct CallTags {
    pub function: String,
    pub object: String,
}

/// The logger of a loaded driver named `driver`. It knows the secrets before the driver runs:
/// the values of credential-named variables of `env` (what the driver will see) and the
/// credential-named keys of its cloud config.
pub(crate) fn logger(
    driver: &str,
    config: &Config,
    env: &[(String, String)],
    cloud_config: &[u8],
) -> DriverLogger {
    let logger = DriverLogger::new(driver, config.sink.clone(), config.limits);
    for (k, v) in env {
        if is_secret_env_name(k) {
            logger.add_secret(v);
        }
    }
    for secret in crate::config_secrets::secrets_in_config(cloud_config) {
        logger.add_secret(&secret);
    }
    logger
}

/// The logger of a driver before `info` ran, tagged with where it came from.
pub(crate) fn bare(origin: &str, config: &Config) -> DriverLogger {
    DriverLogger::new(origin, config.sink.clone(), config.limits)
}

/// What `log` needs of a store's data: the driver's logger and the instance's call tags.
pub(crate) trait LogView {
    /// The host view the bindings call.
    fn log_host(&mut self) -> LogHost<'_>;
}

/// What `log.log` and `log.redact` need of an instance's state.
pub(crate) struct LogHost<'a> {
    logger: &'a DriverLogger,
    tags: &'a Mutex<CallTags>,
}

impl<'a> LogHost<'a> {
    /// A view of the driver's logger and the instance's call tags.
    pub(crate) fn new(logger: &'a DriverLogger, tags: &'a Mutex<CallTags>) -> Self {
        LogHost { logger, tags }
    }
}

impl wit::Host for LogHost<'_> {
    fn log(&mut self, level: wit::Level, message: String, fields: Vec<(String, String)>) {
        let level = Level::from(level);
        // Per-instance tags: the lock is never contended, and borrowing avoids copying them.
        let Ok(tags) = self.tags.lock() else {
            return;
        };
        self.logger.log(
            level,
            Source::Driver,
            &tags.function,
            &tags.object,
            &message,
            &fields,
        );
    }

    fn redact(&mut self, secret: String) {
        let Ok(tags) = self.tags.lock() else {
            return;
        };
        self.logger
            .add_driver_secret(&secret, &tags.function, &tags.object);
    }
}

/// Selects [`LogHost`] as what the bindings call.
struct LogData;

impl HasData for LogData {
    type Data<'a> = LogHost<'a>;
}

/// Links `log` for a store whose data is a [`LogView`].
pub(crate) fn add_to_linker<T: LogView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    wit::add_to_linker::<T, LogData>(linker, T::log_host)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::bindings::log::Host as _;

    fn tags(function: &str, object: &str) -> Mutex<CallTags> {
        Mutex::new(CallTags {
            function: function.into(),
            object: object.into(),
        })
    }

    #[test]
    fn lines_carry_the_calls_tags_and_lose_redacted_secrets() {
        let sink = Arc::new(MemorySink::default());
        let logger = DriverLogger::new("acme", sink.clone(), LogLimits::default());
        let tags = tags("load-balancer.ensure", "default/web");
        let mut host = LogHost::new(&logger, &tags);
        host.redact("s3cr3t-token-value".into());
        host.log(
            wit::Level::Warn,
            "token s3cr3t-token-value refused".into(),
            vec![("zone".into(), "a".into())],
        );
        let records = sink.records();
        let line = records
            .iter()
            .find(|r| r.source == Source::Driver)
            .expect("the driver's line");
        assert_eq!(line.level, Level::Warn);
        assert_eq!(line.function, "load-balancer.ensure");
        assert_eq!(line.object, "default/web");
        assert!(
            !line.message.contains("s3cr3t-token-value"),
            "{}",
            line.message
        );
        assert_eq!(logger.secret_count(), 1);
    }

    #[test]
    fn the_config_and_credential_named_env_values_are_secrets_from_the_start() {
        let cloud_config = b"apiToken: from-the-cloud-config-1234\n";
        let config = Config {
            limits: LogLimits::default(),
            sink: Arc::new(NullSink),
        };
        let env = [
            (
                "ACME_API_TOKEN".to_string(),
                "from-the-environment-5678".to_string(),
            ),
            ("ACME_REGION".to_string(), "region-not-a-secret".to_string()),
        ];
        let logger = logger("acme", &config, &env, cloud_config);
        let text = "from-the-cloud-config-1234 from-the-environment-5678 region-not-a-secret";
        let shown = logger.redact(text);
        assert!(!shown.contains("from-the-cloud-config-1234"), "{shown}");
        assert!(!shown.contains("from-the-environment-5678"), "{shown}");
        assert!(shown.contains("region-not-a-secret"), "{shown}");
    }
}
