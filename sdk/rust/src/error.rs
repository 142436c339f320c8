//! The error every driver function returns.

use std::fmt;

use crate::types::Retry;

/// What a driver reports when a call did not succeed (`provider-error` in the WIT).
///
/// The host maps each case onto the controllers' requeue, backoff and events, so choose the case
/// that says what happened. Written by hand rather than generated so that it can carry a readable
/// [`Display`](fmt::Display); the cases mirror the WIT exactly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProviderError {
    /// The object (instance, load balancer, route) does not exist in the cloud.
    NotFound(String),
    /// The driver does not implement this function.
    NotImplemented,
    /// Another component manages this object; the host treats ensure/update as a no-op.
    ImplementedElsewhere,
    /// The operator's configuration or an annotation is wrong: Warning event, slow retry.
    InvalidConfig(String),
    /// The cloud refused the credentials (HTTP 401/403).
    Unauthorized(String),
    /// The cloud asked us to slow down (HTTP 429); seconds from Retry-After when known.
    RateLimited(Option<u32>),
    /// Work is under way in the cloud: call again after exactly `seconds`.
    RetryAfter(Retry),
    /// A failure that may pass by itself (network, HTTP 5xx, timeouts): exponential backoff.
    Transient(String),
    /// A failure that retrying will not fix without a change somewhere.
    Permanent(String),
}

impl ProviderError {
    /// `not-found` with a message.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::NotFound(message.into())
    }

    /// `invalid-config` with a message.
    pub fn invalid_config(message: impl Into<String>) -> Self {
        Self::InvalidConfig(message.into())
    }

    /// `unauthorized` with a message.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::Unauthorized(message.into())
    }

    /// `transient` with a message.
    pub fn transient(message: impl Into<String>) -> Self {
        Self::Transient(message.into())
    }

    /// `permanent` with a message.
    pub fn permanent(message: impl Into<String>) -> Self {
        Self::Permanent(message.into())
    }

    /// `retry-after`: call again after `seconds`, because of `reason`.
    pub fn retry_after(seconds: u32, reason: impl Into<String>) -> Self {
        Self::RetryAfter(Retry {
            seconds,
            reason: reason.into(),
        })
    }

    /// The WIT name of the case, e.g. `invalid-config`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NotFound(_) => "not-found",
            Self::NotImplemented => "not-implemented",
            Self::ImplementedElsewhere => "implemented-elsewhere",
            Self::InvalidConfig(_) => "invalid-config",
            Self::Unauthorized(_) => "unauthorized",
            Self::RateLimited(_) => "rate-limited",
            Self::RetryAfter(_) => "retry-after",
            Self::Transient(_) => "transient",
            Self::Permanent(_) => "permanent",
        }
    }
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = self.kind();
        match self {
            Self::NotFound(m)
            | Self::InvalidConfig(m)
            | Self::Unauthorized(m)
            | Self::Transient(m)
            | Self::Permanent(m) => write!(f, "{kind}: {m}"),
            Self::NotImplemented | Self::ImplementedElsewhere => f.write_str(kind),
            Self::RateLimited(Some(s)) => write!(f, "{kind}: retry after {s}s"),
            Self::RateLimited(None) => f.write_str(kind),
            Self::RetryAfter(r) => write!(f, "{kind} {}s: {}", r.seconds, r.reason),
        }
    }
}

impl std::error::Error for ProviderError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_case() {
        assert_eq!(
            ProviderError::invalid_config("bad").to_string(),
            "invalid-config: bad"
        );
        assert_eq!(
            ProviderError::retry_after(5, "provisioning").to_string(),
            "retry-after 5s: provisioning"
        );
        assert_eq!(ProviderError::NotImplemented.to_string(), "not-implemented");
        assert_eq!(
            ProviderError::RateLimited(Some(3)).to_string(),
            "rate-limited: retry after 3s"
        );
    }
}
