//! The `log` capability: driver log lines into the host's log, tagged with the driver, function
//! and object, bounded, rate-limited and redacted ([`DriverLogger`]). The driver's stdout and
//! stderr become log lines too.
//!
//! As a capability unit (see `crate::capability`):
//! - config: [`LogLimits`] and the [`LogSink`] from the driver's options, and the secrets the
//!   host finds in the driver's environment and cloud config (`from_options`);
//! - per-driver state: one [`DriverLogger`] in the driver's `DriverHost`, which every other part
//!   of the host also redacts driver text with;
//! - per-instance state: the call's tags (shared with stdout and stderr); no per-call state;
//! - host view: `LogHost`, which implements `log::Host`.

mod logger;
pub(crate) mod stdio;

// The public `wasm_ccm_runtime::log` API is the logger's, unchanged by the move into the
// capability unit.
pub use self::logger::*;

use std::sync::Mutex;

use wasmtime::component::{HasData, Linker};

use super::CapabilityInfo;
use crate::bindings::log as wit;
use crate::driver::DriverOptions;
use crate::state::{CallTags, InstanceState};

/// The capability's entry in [`crate::capability::ALL`].
pub(crate) const INFO: CapabilityInfo = CapabilityInfo {
    name: "log",
    stands_in_for: &[],
    add_to_linker,
};

/// The logger of a loaded driver named `driver`. It knows the secrets before the driver runs:
/// the values of credential-named variables of `env` (what the driver will see) and the
/// credential-named keys of the cloud config.
pub(crate) fn from_options(
    driver: &str,
    opts: &DriverOptions,
    env: &[(String, String)],
) -> DriverLogger {
    let logger = DriverLogger::new(driver, opts.log_sink.clone(), opts.log);
    for (k, v) in env {
        if is_secret_env_name(k) {
            logger.add_secret(v);
        }
    }
    for secret in crate::config_secrets::secrets_in_config(&opts.config) {
        logger.add_secret(&secret);
    }
    logger
}

/// The logger of a driver before `info` ran, tagged with where it came from.
pub(crate) fn bare(origin: &str, opts: &DriverOptions) -> DriverLogger {
    DriverLogger::new(origin, opts.log_sink.clone(), opts.log)
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

fn view(s: &mut InstanceState) -> LogHost<'_> {
    LogHost::new(&s.host.logger, &s.tags)
}

fn add_to_linker(linker: &mut Linker<InstanceState>) -> wasmtime::Result<()> {
    wit::add_to_linker::<_, LogData>(linker, view)
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
        let opts = DriverOptions {
            config: b"apiToken: from-the-cloud-config-1234\n".to_vec(),
            ..Default::default()
        };
        let env = [
            (
                "ACME_API_TOKEN".to_string(),
                "from-the-environment-5678".to_string(),
            ),
            ("ACME_REGION".to_string(), "region-not-a-secret".to_string()),
        ];
        let logger = from_options("acme", &opts, &env);
        let text = "from-the-cloud-config-1234 from-the-environment-5678 region-not-a-secret";
        let shown = logger.redact(text);
        assert!(!shown.contains("from-the-cloud-config-1234"), "{shown}");
        assert!(!shown.contains("from-the-environment-5678"), "{shown}");
        assert!(shown.contains("region-not-a-secret"), "{shown}");
    }
}
