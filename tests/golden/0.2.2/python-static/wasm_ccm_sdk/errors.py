"""Errors a driver raises; the host receives them as the WIT `provider-error` they name.

componentize-py turns only an exception that *is* `componentize_py_types.Err` into the error
case of a WIT `result`; anything else traps. Drivers raise the classes below instead, and the
`@export` decorator converts them at the boundary.
"""
from componentize_py_types import Err
from wit_world.imports import types as _t


class ProviderError(Exception):
    """Base of every error a driver may return to the host."""

    def to_wit(self):
        raise NotImplementedError


class NotFound(ProviderError):
    """The instance or load balancer does not exist (the host may delete the Node)."""

    def to_wit(self):
        return _t.ProviderError_NotFound(str(self))


class Unimplemented(ProviderError):
    """This driver does not implement the function."""

    def to_wit(self):
        return _t.ProviderError_NotImplemented()


class ImplementedElsewhere(ProviderError):
    """Another controller owns this object (for example an external load-balancer class)."""

    def to_wit(self):
        return _t.ProviderError_ImplementedElsewhere()


class InvalidConfig(ProviderError):
    """The cloud-config, an annotation or a Service field is wrong; say which and how to fix it."""

    def to_wit(self):
        return _t.ProviderError_InvalidConfig(str(self))


class Unauthorized(ProviderError):
    """The cloud refused the credentials."""

    def to_wit(self):
        return _t.ProviderError_Unauthorized(str(self))


class RateLimited(ProviderError):
    """The cloud throttled us; `seconds` is its Retry-After, if it gave one."""

    def __init__(self, seconds=None):
        super().__init__(f"rate limited (retry after {seconds} s)" if seconds else "rate limited")
        self.seconds = seconds

    def to_wit(self):
        return _t.ProviderError_RateLimited(self.seconds)


class RetryAfter(ProviderError):
    """Work is under way in the cloud; ask again in `seconds`."""

    def __init__(self, seconds, reason):
        super().__init__(reason)
        self.seconds, self.reason = seconds, reason

    def to_wit(self):
        return _t.ProviderError_RetryAfter(_t.Retry(self.seconds, self.reason))


class Transient(ProviderError):
    """A failure worth retrying with backoff (5xx, timeouts, connection errors)."""

    def to_wit(self):
        return _t.ProviderError_Transient(str(self))


class Permanent(ProviderError):
    """A failure retrying will not fix."""

    def to_wit(self):
        return _t.ProviderError_Permanent(str(self))


def to_err(error):
    """The `Err` componentize-py returns to the host for `error`."""
    return Err(error.to_wit())
