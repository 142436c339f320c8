"""`@export`: the boundary between driver code and the host.

- A `ProviderError` raised by the driver becomes the WIT error it names.
- Any other exception is a bug: its traceback goes to the host's log, and the call traps (the
  host reports a crashed driver and replaces the instance), as a Rust driver's panic does.
- A function whose WIT result is `bool` must return a bool: `instance_exists` returning `None`
  would otherwise read as `false`, and the host would delete the Node.
- The exported `Instances` class is remembered: the SDK's `InstanceListing` (contract 0.2.2,
  `listing.py`) answers with its `list_instances`, so a driver lists where it looks up.
"""
import functools
import traceback

from componentize_py_types import Err
from wit_world import exports

from . import cluster, log
from .errors import ProviderError

# `load-balancer.ensure` and `update` take a node set (a generation and a count); the driver's
# methods receive its nodes.
_TAKES_NODE_SET = ("ensure", "update")

# The driver's `@export`ed `Instances` class, set when its module is imported.
_instances = None


def exported_instances():
    """The class the driver exports as `Instances` (decorated with `@export`), or None."""
    return _instances


def _wit_return(cls, name):
    for base in cls.__mro__[1:]:
        method = base.__dict__.get(name)
        if method is not None:
            return getattr(method, "__annotations__", {}).get("return")
    return None


def _guard(cls, name, fn):
    wants_bool = _wit_return(cls, name) is bool

    takes_node_set = name in _TAKES_NODE_SET

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            if takes_node_set and len(args) == 3 and hasattr(args[2], "generation"):
                args = (args[0], args[1], cluster.nodes_of(args[2]))
            result = fn(*args, **kwargs)
        except ProviderError as e:
            raise Err(e.to_wit()) from None
        except Err:
            raise
        except Exception as e:
            log.error(f"driver bug in {cls.__name__}.{name}: {e!r}",
                      traceback="".join(traceback.format_exception(e)))
            raise
        if wants_bool and not isinstance(result, bool):
            message = (f"{cls.__name__}.{name} returned {result!r} ({type(result).__name__}), "
                       "not a bool")
            log.error(f"driver bug: {message}")
            raise TypeError(message)
        return result

    return call


def export(cls):
    """Class decorator for the classes a driver exports (`Provider`, `Instances`, …)."""
    global _instances
    for name, value in list(vars(cls).items()):
        if callable(value) and not name.startswith("_"):
            setattr(cls, name, _guard(cls, name, value))
    # Not `issubclass`: the generated interface classes are typing Protocols, which refuse it.
    if exports.Instances in cls.__mro__:
        _instances = cls
    return cls
