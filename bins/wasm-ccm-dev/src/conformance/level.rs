//! [`Level`]: how much of the contract `conformance` checks (`--level`).

use clap::ValueEnum;

/// How much of the contract is checked.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    /// `provider` and `instances`: node initialisation and lifecycle.
    Core,
    /// Everything the driver exports; `load-balancer` is required.
    Full,
}

impl Level {
    /// The interfaces the level requires.
    pub(crate) fn required(self) -> &'static [&'static str] {
        match self {
            Level::Core => &["provider", "instances"],
            Level::Full => &["provider", "instances", "load-balancer"],
        }
    }

    /// `core` or `full`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Level::Core => "core",
            Level::Full => "full",
        }
    }
}
