"""Logging to the host's `log` import: lines are tagged with the driver, the function and the
object by the host, rate-limited, and every string passed to `redact` is masked — in log lines
and in everything else of the driver's that the host passes on (errors, events, answers; see
wit/README.md)."""
from wit_world.imports import log as _log

redact = _log.redact


def _fields(kv):
    return [(str(k), str(v)) for k, v in kv.items()]


def trace(msg, **fields):
    _log.log(_log.Level.TRACE, msg, _fields(fields))


def debug(msg, **fields):
    _log.log(_log.Level.DEBUG, msg, _fields(fields))


def info(msg, **fields):
    _log.log(_log.Level.INFO, msg, _fields(fields))


def warn(msg, **fields):
    _log.log(_log.Level.WARN, msg, _fields(fields))


def error(msg, **fields):
    _log.log(_log.Level.ERROR, msg, _fields(fields))
