"""The read-only view of the cluster the host gives drivers, and Kubernetes events."""
from wit_world.imports import cluster as _c

load_balancer_services = _c.load_balancer_services


def normal(reason, message):
    """A Normal event on the object of the current call."""
    _c.event(_c.EventType.NORMAL, reason, message)


def warning(reason, message):
    """A Warning event on the object of the current call."""
    _c.event(_c.EventType.WARNING, reason, message)
