//! A cloud's `sim <cloud>` subcommand ([`SimCli`]) and the value parsers the subcommands share.
//! A leaf: `crate::cli` assembles the subcommands from the list, the clouds name only this.

use std::time::Duration;

use super::cloud::BoxFuture;

/// A cloud's subcommand of `wasm-ccm-sim` and `wasm-ccm-dev sim` (named as the cloud): the
/// simulator standalone, with its own options, until stopped.
pub struct SimCli {
    /// The subcommand's help line.
    pub about: &'static str,
    /// Adds its options to the subcommand (`clap::Args::augment_args` of its options).
    pub args: fn(clap::Command) -> clap::Command,
    /// Runs it with the options parsed from the subcommand's matches.
    pub run: fn(clap::ArgMatches) -> BoxFuture<'static, anyhow::Result<()>>,
}

/// `500ms`, `2s`, `1m`, or a plain number of seconds.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 2s or 500ms"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n.saturating_mul(60))),
        _ => Err(format!("{text:?}: the unit must be ms, s or m")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert!(parse_duration("2h").is_err());
        assert!(parse_duration("s").is_err());
    }
}
